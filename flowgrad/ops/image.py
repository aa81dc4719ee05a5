"""``tf.image``: resizing (bilinear, nearest neighbour) and simple transforms."""
