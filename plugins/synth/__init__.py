"""Bundled synthesis components: the dependency-graph extractor, the live-state sampler, the
rule-based and LLM teachers, and the robustness perturbations."""
