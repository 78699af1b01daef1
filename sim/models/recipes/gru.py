"""gru: a stateful GRU sequence model, 6 steps x 8 features per invocation, 3 sigmoid scores out.

Keras GRU(24, stateful=True, unroll=True) -> dense 3 -> sigmoid; one state variable (h), kept
between invocations. Trained as a non-stateful twin, then copied into the batch-1 stateful model
(the same route as lstm.py; see there for the quirks).
"""

import keras
import numpy as np
from keras.src import backend  # private API, keras pinned to 3.15.1 in env A
from keras.src.utils import tracking

NAME = "gru"
DESCRIPTION = "GRU(24, stateful, unroll) over 6x8, dense 3, sigmoid; 3 invocations, state carried over"
INPUT_NAME = "sequence"
INPUT_SHAPE = (1, 6, 8)
STATEFUL = True
INVOCATIONS = 3


class NamedStateGRU(keras.layers.GRU):
    """Names the state variable state_h (lstm.py explains why the names matter)."""

    @tracking.no_automatic_dependency_tracking
    def _create_state_variables(self, batch_size):
        with backend.name_scope(self.name, caller=self):
            self.states = [
                backend.Variable(value, trainable=False, dtype=self.variable_dtype, name=name)
                for value, name in zip(self.get_initial_state(batch_size), ("state_h",))
            ]


def _data(rng, n):
    return rng.normal(size=(n, 6, 8)).astype(np.float32)


def _model(batch, stateful):
    L = keras.layers
    inp = keras.Input(batch_shape=(batch, 6, 8), name=INPUT_NAME)
    h = NamedStateGRU(24, stateful=stateful, unroll=True, name="gru")(inp)
    out = L.Dense(3, activation="sigmoid", name="dense")(h)
    return keras.Model(inp, out, name=NAME)


def build(rng):
    w = rng.normal(size=(8, 3)).astype(np.float32)
    x = _data(rng, 512)
    decay = 0.6 ** np.arange(5, -1, -1, dtype=np.float32)
    y = (np.einsum("ntf,fk,t->nk", x, w, decay) > 0).astype(np.float32)

    train = _model(None, stateful=False)
    train.compile(optimizer=keras.optimizers.Adam(0.01), loss="binary_crossentropy")
    hist = train.fit(x, y, batch_size=32, epochs=3, shuffle=False, verbose=0)

    model = _model(1, stateful=True)
    model.set_weights(train.get_weights())
    return model, hist.history["loss"]


def representative(rng):
    return [s[None] for s in _data(rng, 64)]


def test_inputs(rng):
    return [s[None] for s in _data(rng, INVOCATIONS)]
