"""resnet_pool: a small residual CNN with average and max pooling, for compiler work.

conv3x3 ReLU -> [conv3x3 ReLU -> conv3x3] + skip (int8 ADD) -> ReLU -> average-pool 2x2 ->
max-pool 2x2 -> dense 6 (int8 logits, no activation).
Synthetic task: which of 6 fixed random patterns the 4x4-pooled image correlates with most.
"""

import keras
import numpy as np

NAME = "resnet_pool"
DESCRIPTION = ("conv3x3 ReLU, residual block (conv3x3 ReLU, conv3x3, int8 ADD with the skip), ReLU, "
               "avg-pool 2x2, max-pool 2x2, dense 6")
INPUT_NAME = "image"
INPUT_SHAPE = (1, 16, 16, 4)
STATEFUL = False
INVOCATIONS = 1


def _data(rng, n):
    return rng.uniform(-1.0, 1.0, size=(n, 16, 16, 4)).astype(np.float32)


def build(rng):
    patterns = rng.normal(size=(6, 4, 4, 4)).astype(np.float32)
    x = _data(rng, 512)
    pooled = x.reshape(512, 4, 4, 4, 4, 4).mean(axis=(2, 4))
    y = np.argmax(np.einsum("nhwc,khwc->nk", pooled, patterns), axis=1)

    L = keras.layers
    inp = keras.Input(shape=INPUT_SHAPE[1:], name=INPUT_NAME)
    h = L.Conv2D(8, 3, padding="same", activation="relu")(inp)
    r = L.Conv2D(8, 3, padding="same", activation="relu")(h)
    r = L.Conv2D(8, 3, padding="same")(r)
    h = L.ReLU()(L.Add()([h, r]))
    h = L.AveragePooling2D(2)(h)
    h = L.MaxPooling2D(2)(h)
    h = L.Flatten()(h)
    out = L.Dense(6)(h)
    model = keras.Model(inp, out, name=NAME)
    model.compile(optimizer=keras.optimizers.Adam(0.005),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    hist = model.fit(x, y, batch_size=32, epochs=6, shuffle=False, verbose=0)
    return model, hist.history["loss"]


def representative(rng):
    return [s[None] for s in _data(rng, 64)]


def test_inputs(rng):
    return [_data(rng, 1)]
