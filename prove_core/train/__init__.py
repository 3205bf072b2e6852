"""``prove train``: the trainer contract, the held-out evaluation and the stage (``core``), and the
training report (``report``). Training backends themselves are plugins (``prove_plugins.train``)."""
