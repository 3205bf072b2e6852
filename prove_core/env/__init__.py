"""Live environments: sessions of a server and the in-process executor (``runtime``), the MCP
path (``serving``), scripted episodes (``episode``), the multi-turn rollout loop that training,
evaluation and replays share (``rollout``) and the generated server catalog (``catalog``)."""
