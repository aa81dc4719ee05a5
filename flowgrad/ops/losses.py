"""``tf.losses``: the loss functions of TF.js, as composites of flowgrad ops."""
