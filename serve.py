"""The dashboard's server: `streamlit run serve.py` serves app.py and pages/ as `streamlit run app.py` does and,
from its start, warms what a first visit needs (ui.warmup), through st.App's lifespan hook. GET /fusion/warm-up
says how the warm-up went (JSON), e.g. for a readiness probe or bench/browser.py."""

import dataclasses

import streamlit as st
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ui import warmup


async def warm_up_state(_request: Request) -> JSONResponse:
    return JSONResponse(dataclasses.asdict(warmup.STATE))


app = st.App("app.py", lifespan=warmup.lifespan, routes=[Route(warmup.PATH, warm_up_state)])
