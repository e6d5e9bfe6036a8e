"""`specserve generate`: every file the repository generates, and the generators that write
them where no other part owns the source (the chart's copies and schema, the version pins, the
reference tables of the docs). The command and its registry: command.py."""
