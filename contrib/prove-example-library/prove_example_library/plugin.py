"""The plugin module named by the ``prove.plugins`` entry point: it only registers components."""

from prove_core import hookimpl
from prove_example_library.server import server


@hookimpl
def prove_register_servers(register):
    register(server)


@hookimpl
def prove_register_samplers(register):
    # Lazy: the sampler module is imported only when a pipeline asks for it. A sampler is a class
    # with sample(env, rules) -> SamplingContext (see prove_example_library/sampler.py).
    register(
        "prove_example_library.sampler:AvailableBooks",
        name="library_available_books",
        summary="Books that a member can borrow right now, found with read-only calls.",
    )
