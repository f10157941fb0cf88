"""Logging a real browser in through the portal's own login form, as every browser test starts."""

PASSWORD = "correct-horse-battery"


def log_in(page, live_server_url: str, username: str, password: str = PASSWORD) -> None:
    page.goto(f"{live_server_url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit], input[type=submit]")
