"""Stream: TCP reassembly. Segments in, ordered bytes per connection and direction out."""
