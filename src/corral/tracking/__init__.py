"""Tracked runs on the server side: batch parsing, series storage and downsampling, the writer."""
