"""``python -m jaxannot.cli``."""

from jaxannot.cli.app import console

console()
