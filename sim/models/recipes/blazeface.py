"""blazeface: a BlazeFace-style face detector (Bazarevsky et al. 2019), 128x128 RGB in, 896 anchors out.

conv5x5/s2 24 ReLU (64x64) -> BlazeBlocks -> two detection heads, in the spirit of the paper and of
MediaPipe's front-camera model. A BlazeBlock is depthwise5x5 -> pointwise1x1 (no activation in
between), added to a skip path (int8 ADD), then ReLU. When the block changes the channel count the
skip is zero-padded in the channel dimension (a PAD), and a stride-2 block max-pools the skip 2x2
first. Feature maps and channels:

    64x64: stem 24, block 24->24
    32x32: block 24->32 (s2), 32->36, 36->42
    16x16: block 42->48 (s2), 48->56, 56->64, 64->72, 72->80, 80->80  -> head A
     8x8:  block 80->80 (s2), 80->80, 80->80                          -> head B

MediaPipe's model widens to 88 and 96 channels at 16x16 and 8x8; here they stop at 80, because a
5x5 depthwise over more than 80 channels does not fit the 'tiny' NPU configuration: the compiler
loads every channel of a depthwise tile's 5x5 input box (25 x 88 = 2200 bytes > its 2048-byte
input SRAM) and would leave those layers to the host.

Heads (1x1 convs, as in MediaPipe): A at 16x16, 2 anchors per cell, a score (2 channels) and 16
regressors per anchor (32 channels: box dx, dy, w, h and 6 keypoints x, y); B at 8x8, 6 anchors
per cell (6 + 96 channels). Each is reshaped to [1, anchors, K] (anchor index =
(row * width + column) * anchors_per_cell + a), the 512 + 384 anchors concatenated, then scores
and regressors side by side: one output [1, 896, 17], channel 0 the score logit (no sigmoid, as
MediaPipe leaves it to the post-processing), 1..16 the regressors.

Multiply-accumulates (conv: Ho*Wo*Cout*K*K*Cin, depthwise: Ho*Wo*C*K*K), 29,621,760 in all:
    stem conv5x5 3->24 at 64x64                   7,372,800
    block at 64x64 (24->24)                       4,816,896
    blocks at 32x32 (s2 24->32, 32->36, 36->42)   5,869,568
    blocks at 16x16 (s2 42->48 ... 80->80)        8,731,136
    blocks at 8x8 (s2 80->80, 80->80 x 2)         1,612,800
    head A (80->2 and 80->32 at 16x16)              696,320
    head B (80->6 and 80->96 at 8x8)                522,240
Keras parameters: 80,546.

Synthetic task: dark noisy images with 1 or 2 bright elliptical "faces" (random colour and size,
two dark eyes, a nose and a mouth); each face is assigned to the anchors of the cell holding its
centre, on the 16x16 grid when it is under 32 pixels wide, else on the 8x8 grid. Targets: score 1
on those anchors, 0 elsewhere; regressors (only on them) the box centre offset from the anchor
centre and the box size, and 6 keypoints relative to the anchor centre, in units of 16 pixels.
A few epochs: the point is realistic quantised weights and activations, not a good detector.
"""

import keras
import numpy as np

NAME = "blazeface"
DESCRIPTION = ("BlazeFace-style detector: conv5x5/s2 24, 13 BlazeBlocks (depthwise5x5, pointwise, skip with "
               "max-pool 2x2 and channel padding, int8 ADD, ReLU) 64x64 -> 8x8, 1x1 heads at 16x16 (2 anchors) "
               "and 8x8 (6 anchors), 896 anchors x (score logit, 16 regressors); 29.6 M MACs")
INPUT_NAME = "image"
INPUT_SHAPE = (1, 128, 128, 3)
STATEFUL = False
INVOCATIONS = 1

SIZE = 128
UNIT = 16.0  # regressor unit, pixels
# (grid, anchors per cell) of the two heads, in output order
LEVELS = ((16, 2), (8, 6))
ANCHORS = sum(g * g * a for g, a in LEVELS)  # 896
# keypoints relative to the face centre, in face widths/heights: right eye, left eye, nose,
# mouth, right ear, left ear
KEYPOINTS = np.array([[-0.2, -0.15], [0.2, -0.15], [0.0, 0.05], [0.0, 0.25], [-0.45, 0.0], [0.45, 0.0]],
                     dtype=np.float32)


def _faces(rng, n):
    """Per image 1 or 2 faces: rows of (cx, cy, w, h, r, g, b), padded with NaN rows."""
    faces = np.full((n, 2, 7), np.nan, dtype=np.float32)
    count = rng.integers(1, 3, size=n)
    for i in range(n):
        for j in range(count[i]):
            w = rng.uniform(12.0, 56.0)
            h = w * rng.uniform(1.0, 1.3)
            cx, cy = rng.uniform(w / 2, SIZE - w / 2), rng.uniform(h / 2, SIZE - h / 2)
            faces[i, j] = (cx, cy, w, h, *rng.uniform(0.55, 1.0, size=3))
    return faces


def _render(rng, faces):
    n = faces.shape[0]
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32) + 0.5
    x = 0.15 * rng.uniform(0.0, 1.0, size=(n, SIZE, SIZE, 3)).astype(np.float32)
    x += 0.15 * rng.uniform(0.0, 1.0, size=(n, 1, 1, 3)).astype(np.float32) * (xx / SIZE)[None, :, :, None]
    for i in range(n):
        for cx, cy, w, h, r, g, b in faces[i]:
            if np.isnan(cx):
                continue
            inside = ((xx - cx) / (w / 2)) ** 2 + ((yy - cy) / (h / 2)) ** 2 <= 1.0
            x[i][inside] = np.array([r, g, b], dtype=np.float32) * (0.85 + 0.15 * rng.uniform(size=(inside.sum(), 1)))
            for k, (kx, ky) in enumerate(KEYPOINTS[:4]):
                rad = w * (0.07 if k < 2 else 0.05)
                spot = (xx - (cx + kx * w)) ** 2 + (yy - (cy + ky * h)) ** 2 <= rad ** 2
                x[i][spot] = 0.1
    return np.clip(x, 0.0, 1.0)


def _targets(faces):
    """[n, 896, 17]: score, then dx, dy, w, h and 6 keypoints (x, y), in UNIT pixels."""
    n = faces.shape[0]
    y = np.zeros((n, ANCHORS, 17), dtype=np.float32)
    for i in range(n):
        for cx, cy, w, h, *_ in faces[i]:
            if np.isnan(cx):
                continue
            base = 0
            for grid, per_cell in LEVELS:
                if (grid == 16) == (w < 32.0):
                    cell = SIZE / grid
                    col, row = min(int(cx // cell), grid - 1), min(int(cy // cell), grid - 1)
                    ax, ay = (col + 0.5) * cell, (row + 0.5) * cell
                    kp = (np.array([cx, cy]) + KEYPOINTS * np.array([w, h]) - np.array([ax, ay])) / UNIT
                    reg = np.concatenate([[(cx - ax) / UNIT, (cy - ay) / UNIT, w / UNIT, h / UNIT], kp.ravel()])
                    first = base + (row * grid + col) * per_cell
                    y[i, first:first + per_cell, 0] = 1.0
                    y[i, first:first + per_cell, 1:] = reg
                base += grid * grid * per_cell
    return y


def _data(rng, n):
    faces = _faces(rng, n)
    return _render(rng, faces), _targets(faces)


def _loss(y_true, y_pred):
    ops = keras.ops
    score = y_true[..., 0]
    bce = ops.mean(ops.binary_crossentropy(score, y_pred[..., 0], from_logits=True))
    err = ops.abs(y_true[..., 1:] - y_pred[..., 1:])
    huber = ops.where(err < 1.0, 0.5 * err * err, err - 0.5)
    reg = ops.sum(ops.sum(huber, axis=-1) * score) / (ops.sum(score) + 1.0)
    return 20.0 * bce + reg


def _blaze_block(h, c_out, stride):
    L = keras.layers
    c_in = h.shape[-1]
    r = L.DepthwiseConv2D(5, strides=stride, padding="same")(h)
    r = L.Conv2D(c_out, 1)(r)
    skip = L.MaxPooling2D(2)(h) if stride == 2 else h
    if c_out > c_in:
        skip = keras.ops.pad(skip, ((0, 0), (0, 0), (0, 0), (0, c_out - c_in)))
    return L.ReLU()(L.Add()([skip, r]))


def _head(h, per_cell):
    L = keras.layers
    grid = h.shape[1]
    scores = L.Reshape((grid * grid * per_cell, 1))(L.Conv2D(per_cell, 1)(h))
    boxes = L.Reshape((grid * grid * per_cell, 16))(L.Conv2D(per_cell * 16, 1)(h))
    return scores, boxes


def build(rng):
    x, y = _data(rng, 512)

    L = keras.layers
    inp = keras.Input(shape=INPUT_SHAPE[1:], name=INPUT_NAME)
    h = L.Conv2D(24, 5, strides=2, padding="same", activation="relu")(inp)
    for c_out, stride in ((24, 1), (32, 2), (36, 1), (42, 1), (48, 2), (56, 1), (64, 1), (72, 1), (80, 1), (80, 1)):
        h = _blaze_block(h, c_out, stride)
    s16, b16 = _head(h, 2)
    for c_out, stride in ((80, 2), (80, 1), (80, 1)):
        h = _blaze_block(h, c_out, stride)
    s8, b8 = _head(h, 6)
    scores = L.Concatenate(axis=1)([s16, s8])
    boxes = L.Concatenate(axis=1)([b16, b8])
    out = L.Concatenate(axis=-1)([scores, boxes])
    model = keras.Model(inp, out, name=NAME)
    model.compile(optimizer=keras.optimizers.Adam(0.002), loss=_loss)
    hist = model.fit(x, y, batch_size=32, epochs=4, shuffle=False, verbose=0)
    return model, hist.history["loss"]


def representative(rng):
    return [s[None] for s in _data(rng, 64)[0]]


def test_inputs(rng):
    return [_data(rng, 1)[0]]
