"""Headless Chromium for the HTML report's tests and benchmark, driven by Selenium.

Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them when missing); never a
downloaded browser: the binaries are named explicitly, so Selenium Manager is not consulted. The
flags keep Chromium off the network (the machines have none, and it hangs looking for it).
``browser_or_skip()`` skips a test cleanly when the browser, the driver or Selenium is absent.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
DRIVER_CANDIDATES = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--window-size=1400,1000")
REPO = Path(__file__).resolve().parents[1]


def _first(paths, env: str) -> str | None:
    given = os.environ.get(env)
    if given:
        return given if os.path.exists(given) else None
    return next((p for p in paths if os.path.exists(p)), None)


def chromium_path() -> str | None:
    return _first(CHROMIUM_CANDIDATES, "TILEFIT_CHROMIUM")


def driver_path() -> str | None:
    return _first(DRIVER_CANDIDATES, "TILEFIT_CHROMEDRIVER")


def missing() -> str | None:
    """Why no browser test can run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    if chromium_path() is None:
        return "no chromium (apt-get install chromium chromium-driver)"
    if driver_path() is None:
        return "no chromedriver (apt-get install chromium-driver)"
    return None


def artifacts_dir() -> Path:
    """Where screenshots go: $TILEFIT_TEST_ARTIFACTS, else build/test-artifacts (ignored by git)."""
    path = Path(os.environ.get("TILEFIT_TEST_ARTIFACTS") or REPO / "build" / "test-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


class Browser:
    """One Chromium with a fresh profile; ``quit()`` removes the profile."""

    def __init__(self):
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service

        self.profile = tempfile.mkdtemp(prefix="tilefit-chromium-")
        opts = Options()
        opts.binary_location = chromium_path()
        for flag in FLAGS:
            opts.add_argument(flag)
        opts.add_argument(f"--user-data-dir={self.profile}")
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        try:
            self.driver = webdriver.Chrome(service=Service(driver_path()), options=opts)
        except Exception:
            shutil.rmtree(self.profile, ignore_errors=True)
            raise
        self.driver.set_page_load_timeout(60)

    def open(self, path: Path, fragment: str = "") -> None:
        self.driver.get(Path(path).resolve().as_uri() + fragment)

    def console_errors(self) -> list[dict]:
        return [e for e in self.driver.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]

    def js(self, script: str, *args):
        return self.driver.execute_script(script, *args)

    def quit(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)


def browser_or_skip():
    import pytest

    why = missing()
    if why:
        pytest.skip(f"browser tests: {why}")
    return Browser()
