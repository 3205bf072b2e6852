"""The bundled stateful MCP servers (installed as ``prove_servers``), one module each."""
