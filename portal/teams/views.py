"""Team pages, token management, and a sign-in view with a rate limit on failures."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from portal.ratelimit import client_ip, count, exceeded
from portal.submissions.forms import TokenForm
from portal.submissions.selectors import submissions_base
from portal.teams.models import ApiToken, Team
from portal.teams.selectors import team_for_user, team_tokens, teams_of
from portal.teams.services import TokenError, token_create, token_revoke


def _login_keys(request: HttpRequest) -> tuple[str, str]:
    """Failures count per client address and per account name: one address guessing many
    passwords, and many addresses guessing one account's, both meet the limit."""
    username = str(request.POST.get("username", ""))[:150].lower()
    account = hashlib.sha256(username.encode()).hexdigest()[:32]  # any text the form sent: a safe cache key
    return f"login-failures:ip:{client_ip(request)}", f"login-failures:user:{account}"


class RateLimitedLoginView(LoginView):
    """Django's sign-in, refusing a client after ``D2K_LOGIN_RATE_PER_MIN`` failures in a minute
    (from its address, or on the account it names). The admin's sign-in redirects here."""

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:  # noqa: ANN002, ANN003
        if exceeded(*_login_keys(request), limit=settings.D2K_LOGIN_RATE_PER_MIN):
            response = render(request, "registration/login.html",
                              {"form": self.get_form(), "rate_limited": True}, status=429)
            response["Retry-After"] = "60"
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form) -> HttpResponse:  # noqa: ANN001
        count(*_login_keys(self.request))
        return super().form_invalid(form)


def _team(request: HttpRequest, slug: str) -> Team:
    team = team_for_user(request.user, slug)
    if team is None:
        raise Http404("no such team")
    return team


@login_required
def mine(request: HttpRequest) -> HttpResponse:
    team = team_for_user(request.user)
    if team is None:
        return render(request, "teams/none.html")
    return redirect("teams:detail", slug=team.slug)


@login_required
def detail(request: HttpRequest, slug: str) -> HttpResponse:
    team = _team(request, slug)
    return render(request, "teams/detail.html", {
        "team": team, "teams": teams_of(request.user),
        "members": team.memberships.select_related("user").order_by("user__username"),
        "submissions": submissions_base().filter(team=team)[:50],
    })


@login_required
def tokens(request: HttpRequest, slug: str) -> HttpResponse:
    team = _team(request, slug)
    form = TokenForm(request.POST or None, initial={"days": settings.D2K_TOKEN_DEFAULT_DAYS})
    issued = None
    limited = request.method == "POST" and exceeded(f"token-create:user:{request.user.pk}",
                                                      limit=settings.D2K_TOKEN_CREATE_PER_HOUR)
    if limited:
        form.add_error(None, "Too many tokens created in the last hour; wait before creating another.")
    elif request.method == "POST" and form.is_valid():
        count(f"token-create:user:{request.user.pk}", window_s=3600)
        try:
            issued = token_create(team, name=form.cleaned_data["name"], actor=request.user,
                                  days=form.cleaned_data["days"])
        except TokenError as exc:
            form.add_error("name", str(exc))
    response = render(request, "teams/tokens.html", {"team": team, "tokens": team_tokens(team), "form": form,
                                                     "issued": issued},
                      status=429 if limited else 400 if form.errors else 200)
    if limited:
        response["Retry-After"] = "3600"
    return response


@login_required
def revoke(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    team = _team(request, slug)
    if request.method != "POST":
        return redirect("teams:tokens", slug=team.slug)
    token = ApiToken.objects.filter(team=team, pk=pk).first()
    if token is None:
        raise Http404("no such token")
    token_revoke(token, actor=request.user)
    messages.success(request, f"Token {token.name!r} is revoked.")
    return redirect("teams:tokens", slug=team.slug)
