"""Log sources: each one follows a stream of SGLang output and hands complete lines to a sink."""
