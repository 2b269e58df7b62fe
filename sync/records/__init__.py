"""The records the port keeps, one module each: parse, validate, render byte-preserving."""
