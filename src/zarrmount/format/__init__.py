"""Pure metadata code: no I/O. Parses documents handed to it by the layers above."""
