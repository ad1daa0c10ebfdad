"""The static-int8 CPU engine: the decoder's and the front's graphs derived once per machine from the official file, with the shipped activation ranges (``ranges/``)."""
