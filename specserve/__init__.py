"""specserve: one deployment profile for SGLang + EAGLE-3, validated and rendered once."""
