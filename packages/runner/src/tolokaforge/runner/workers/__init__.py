"""Python tools in supervised worker processes (the default), or on daemon threads (trusted mode)."""
