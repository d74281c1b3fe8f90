"""`amqpscope tui`: Wireshark's three panes in the terminal (Textual).

A face, like the CLI: it wires the layers (capture → dissect → track) in a worker thread, keeps a
compact record per frame (`store`), and draws with render's pieces (`render.timeline`'s lines).
`seams` holds the few functions that other parts of amqpscope will replace (the -V tree, -x
bytes, diagnoses, -w writer). Textual is the `tui` extra; nothing else imports this package.
"""
