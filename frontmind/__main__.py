"""`python -m frontmind`: the same as the `frontmind` command."""

from ._cli import main

main()
