"""Adapters that let other trainers use PROVE environments: an OpenEnv server and a TRL
``environment_factory`` class (the verl agent loop lives with the verl backend in ``train``)."""
