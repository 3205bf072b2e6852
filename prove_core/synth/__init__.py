"""``prove synth``: the synthesis pipeline (``pipeline``) and its steps — tool graphs and chains
(``graph``), the conversation machine (``conversation``), perturbations (``perturbation``),
replay and filters (``validation``), corpus quality figures (``quality``), imports of external
datasets (``importers``) and exports for trainers (``exporters``)."""
