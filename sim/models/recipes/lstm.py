"""lstm: a stateful sequence model, 8 steps x 16 features per invocation, 4 sigmoid scores out.

Keras LSTM(32, stateful=True, unroll=True) -> dense 4 -> sigmoid. The LSTM's h and c states are
resource variables in TFLite and TOSA variables in the .tosa: they survive between invocations.
Trained (non-stateful twin, batch 32) on a synthetic task, then the weights are copied into the
stateful model with batch fixed to 1 (the only form the TFLite converter accepts).
Quirks: unroll=False crashes TF 2.21's calibrator; the SavedModel route with resource variables
and variable quantisation is the one that converts.
"""

import keras
import numpy as np
from keras.src import backend  # private API, keras pinned to 3.15.1 in env A
from keras.src.utils import tracking

NAME = "lstm"
DESCRIPTION = "LSTM(32, stateful, unroll) over 8x16, dense 4, sigmoid; 3 invocations, state carried over"
INPUT_NAME = "sequence"
INPUT_SHAPE = (1, 8, 16)
STATEFUL = True
INVOCATIONS = 3


def _data(rng, n):
    return rng.normal(size=(n, 8, 16)).astype(np.float32)


class NamedStateLSTM(keras.layers.LSTM):
    """Keras names both state variables "rnn_state"; TensorFlow then makes them unique as
    rnn_state / rnn_state_1 in an order that changes from run to run (h and c swap), so the
    .tflite and .tosa bytes change. Distinct names (state_h, state_c) make the export stable."""

    @tracking.no_automatic_dependency_tracking
    def _create_state_variables(self, batch_size):
        with backend.name_scope(self.name, caller=self):
            self.states = [
                backend.Variable(value, trainable=False, dtype=self.variable_dtype, name=name)
                for value, name in zip(self.get_initial_state(batch_size), ("state_h", "state_c"))
            ]


def _model(batch, stateful):
    L = keras.layers
    inp = keras.Input(batch_shape=(batch, 8, 16), name=INPUT_NAME)
    h = NamedStateLSTM(32, stateful=stateful, unroll=True, name="lstm")(inp)
    out = L.Dense(4, activation="sigmoid", name="dense")(h)
    return keras.Model(inp, out, name=NAME)


def build(rng):
    w = rng.normal(size=(16, 4)).astype(np.float32)
    x = _data(rng, 512)
    # targets: does a running, decaying sum of each projected feature end up positive?
    decay = 0.7 ** np.arange(7, -1, -1, dtype=np.float32)
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
