from sync.launch import entry

entry()
