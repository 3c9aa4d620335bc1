"""Facts about the machine and its software: the fingerprint every record carries,
the frameworks dlbench knows, and the lock the suite passed with.
"""
