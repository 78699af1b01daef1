"""cnn32: a MobileNet-style image classifier, 32x32 RGB in, 10 sigmoid scores out.

conv3x3/s2 -> depthwise3x3 -> pointwise 16 -> max-pool 2x2 -> depthwise3x3 -> pointwise 32
(all ReLU6) -> global average pool -> dense 10 -> sigmoid.
Synthetic task: 10 classes of noisy images, 5 tints x 2 stripe orientations (random period and phase).
"""

import keras
import numpy as np

NAME = "cnn32"
DESCRIPTION = ("conv3x3/s2, depthwise3x3, pointwise, max-pool 2x2, depthwise3x3, pointwise (ReLU6), "
               "global average pool, dense 10, sigmoid")
INPUT_NAME = "image"
INPUT_SHAPE = (1, 32, 32, 3)
STATEFUL = False
INVOCATIONS = 1


def _data(rng, n):
    """Images of 10 classes: 5 tints x 2 stripe orientations, with noise; returns (x, one-hot y)."""
    y = rng.integers(0, 10, size=n)
    tints = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [0, 1, 1]], dtype=np.float32)
    period = rng.integers(3, 7, size=(n, 1, 1))
    phase = rng.integers(0, 6, size=(n, 1, 1))
    rows = np.arange(32)[None, :, None]
    cols = np.arange(32)[None, None, :]
    along = np.where((y % 2 == 0)[:, None, None], rows, cols)
    stripes = ((along + phase) % period < period / 2).astype(np.float32)
    x = (0.45 * tints[y // 2][:, None, None, :] + 0.3 * stripes[..., None]
         + 0.25 * rng.uniform(0.0, 1.0, size=(n, 32, 32, 3)))
    return x.astype(np.float32), np.eye(10, dtype=np.float32)[y]


def build(rng):
    x, y = _data(rng, 2048)

    L = keras.layers
    inp = keras.Input(shape=INPUT_SHAPE[1:], name=INPUT_NAME)
    h = L.Conv2D(8, 3, strides=2, padding="same", activation="relu6")(inp)
    h = L.DepthwiseConv2D(3, padding="same", activation="relu6")(h)
    h = L.Conv2D(16, 1, activation="relu6")(h)
    h = L.MaxPooling2D(2)(h)
    h = L.DepthwiseConv2D(3, padding="same", activation="relu6")(h)
    h = L.Conv2D(32, 1, activation="relu6")(h)
    h = L.GlobalAveragePooling2D()(h)
    out = L.Dense(10, activation="sigmoid")(h)
    model = keras.Model(inp, out, name=NAME)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="binary_crossentropy")
    hist = model.fit(x, y, batch_size=32, epochs=8, shuffle=False, verbose=0)
    return model, hist.history["loss"]


def representative(rng):
    return [s[None] for s in _data(rng, 64)[0]]


def test_inputs(rng):
    return [_data(rng, 1)[0]]
