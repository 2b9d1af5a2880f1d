"""`python -m frontmind`: the same as the `frontmind` command."""

from .cli import main

main()
