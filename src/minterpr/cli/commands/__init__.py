"""One module per command (``register`` adds its parser; ``cli/main.py`` lists them by name).

A command shares code only through :mod:`minterpr.cli.shared`, never by importing another command.
"""
