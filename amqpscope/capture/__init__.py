"""Capture: the only layer that opens files and sockets. Packets out, then TCP segments."""
