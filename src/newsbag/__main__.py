"""`python -m newsbag`: the command line."""

from newsbag.cli import main

main()
