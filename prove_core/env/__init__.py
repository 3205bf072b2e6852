"""Live environments: sessions of a server and the in-process executor (``runtime``), scripted
episodes (``episode``), task-record drift checks (``drift``) and the generated server catalog
(``catalog``). Serving them over MCP lives in ``prove_core.serve``; playing a policy on them, in
``prove_core.reward.rollout``."""
