"""mlp: a 4-layer perceptron, 64 features in, 10-way softmax out.

dense 128 ReLU -> dense 64 ReLU -> dense 10 -> softmax (the int8 softmax becomes ~40 integer TOSA
ops: REDUCE_MAX, CLZ, shifts, MUL, int16 TABLE).
Synthetic task: the argmax of a fixed random linear map of the features.
"""

import keras
import numpy as np

NAME = "mlp"
DESCRIPTION = "dense 64->128 ReLU, 128->64 ReLU, 64->10, softmax"
INPUT_NAME = "features"
INPUT_SHAPE = (1, 64)
STATEFUL = False
INVOCATIONS = 1


def _data(rng, n):
    return rng.normal(size=(n, 64)).astype(np.float32)


def build(rng):
    w = rng.normal(size=(64, 10)).astype(np.float32)
    x = _data(rng, 1024)
    y = np.argmax(x @ w, axis=1)

    L = keras.layers
    inp = keras.Input(shape=INPUT_SHAPE[1:], name=INPUT_NAME)
    h = L.Dense(128, activation="relu")(inp)
    h = L.Dense(64, activation="relu")(h)
    out = L.Dense(10, activation="softmax")(h)
    model = keras.Model(inp, out, name=NAME)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
    hist = model.fit(x, y, batch_size=32, epochs=3, shuffle=False, verbose=0)
    return model, hist.history["loss"]


def representative(rng):
    return [s[None] for s in _data(rng, 64)]


def test_inputs(rng):
    return [_data(rng, 1)]
