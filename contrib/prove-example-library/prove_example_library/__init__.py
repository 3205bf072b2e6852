"""Example third-party PROVE plugin: a lending-library server and a sampler."""
