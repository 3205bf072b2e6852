"""Serving environments to any MCP client: the fastmcp app and its HTTP guards (``app``), the
``tools/call`` fast lane (``fastlane``), the session control API (``control``) and its Python
client (``client``), and scale-out behind nginx (``fleet``). Depends on ``env``, never the other way."""
