"""The README's main command: a local Conveyor with the bundled workflows on sample data."""
