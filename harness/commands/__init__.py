"""One module per subcommand; see harness.cli."""
