"""Ponder a digit: draw or pick a digit, rotate it, and watch the network decide when to stop."""
import streamlit as st

from explorer import canvas, compute, data, loaders, ui, views

ui.app_guard("digit")
st.title("Ponder a digit")
entry = ui.model_picker_ui("mnist")
if entry is None:
    st.stop()
model = loaders.checkpoint(entry).model
CLASSES = [str(c) for c in range(10)]

left, right = st.columns([1, 1.4], gap="large")
with left:
    source = ui.digit_source_ui()
    truth = None
    if source == "Draw":
        from streamlit_drawable_canvas import st_canvas      # only inside a running app

        drawn = st_canvas(stroke_width=18, stroke_color="#FFFFFF", background_color="#000000", width=280,
                          height=280, drawing_mode="freedraw", return_image_data=True, key="canvas")
        digit = canvas.preprocess_canvas(drawn.image_data)
        st.caption("Draw one digit, white on black, filling most of the box. Use the toolbar to undo or clear.")
    else:
        mnist, missing = loaders.mnist()
        pool = data.digit_pool(mnist)
        if missing:
            st.info(f"{missing} Meanwhile you can pick from the {len(pool)} bundled example digits.")
        pos = ui.digit_picker_ui(pool)
        digit, truth = pool.x[pos], int(pool.y[pos])
        st.caption(f"{pool.source}, image #{int(pool.index[pos])}, label {truth}")
    angle = ui.rotation_ui()

with right:
    if digit is None:
        st.info("Draw a digit in the black box (or switch the input to **MNIST test digit**). "
                "The prediction and the step-by-step charts appear as soon as there is some ink.")
        st.stop()
    x = canvas.model_input(digit, angle)
    mode = ui.mode_ui()
    seed = ui.seed_ui(enabled=mode == "sample")
    trace = compute.trace_input(model, x, mode, seed)
    c1, c2 = st.columns([1, 2.2])
    with c1:
        views.seen_image_ui(canvas.seen_image(x), f"What the model sees (28×28{f', rotated {angle:g}°' if angle else ''})")
    with c2:
        views.answer_ui(trace, CLASSES, truth)

st.divider()
views.trace_charts_ui(trace, CLASSES, truth)
