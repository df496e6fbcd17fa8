//! A sink that writes the JSON-lines events of R8.3.
