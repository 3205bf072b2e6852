"""``prove eval``: the evaluator contract, outcomes and reports (``core``). Evaluators themselves
are plugins (``prove_plugins.eval``)."""
