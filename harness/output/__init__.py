"""What a person reads while and after a command runs: terminal tables and progress."""
