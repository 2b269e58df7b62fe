from sync.cli import entry

entry()
