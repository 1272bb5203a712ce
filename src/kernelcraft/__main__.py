"""`python -m kernelcraft`: the command line, as `kernelcraft`."""

from .cli import main

main()
