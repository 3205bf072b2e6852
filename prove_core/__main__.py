"""``python -m prove_core``: the ``prove`` command line, for when ``prove`` on the PATH is another
program (Perl's test harness is ``/usr/bin/prove``) or a desktop client starts servers without
the virtual environment's ``bin`` on its PATH."""

from prove_core.cli import main

main()
