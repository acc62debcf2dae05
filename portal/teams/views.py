"""Team pages, token management, and a sign-in view with a rate limit on failures."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.core.cache import cache
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from portal.submissions.forms import TokenForm
from portal.submissions.selectors import submissions_base
from portal.teams.models import ApiToken, Team
from portal.teams.selectors import team_for_user, team_tokens, teams_of
from portal.teams.services import TokenError, token_create, token_revoke


def _client_key(request: HttpRequest) -> str:
    return f"login-failures:{request.META.get('REMOTE_ADDR', '?')}"


class RateLimitedLoginView(LoginView):
    """Django's sign-in, refusing a client after ``D2K_LOGIN_RATE_PER_MIN`` failures in a minute."""

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:  # noqa: ANN002, ANN003
        if cache.get(_client_key(request), 0) >= settings.D2K_LOGIN_RATE_PER_MIN:
            response = render(request, "registration/login.html",
                              {"form": self.get_form(), "rate_limited": True}, status=429)
            response["Retry-After"] = "60"
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form) -> HttpResponse:  # noqa: ANN001
        key = _client_key(self.request)
        cache.add(key, 0, timeout=60)
        cache.incr(key)
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
    if request.method == "POST" and form.is_valid():
        try:
            issued = token_create(team, name=form.cleaned_data["name"], actor=request.user,
                                  days=form.cleaned_data["days"])
        except TokenError as exc:
            form.add_error("name", str(exc))
    return render(request, "teams/tokens.html", {"team": team, "tokens": team_tokens(team), "form": form,
                                                 "issued": issued}, status=400 if form.errors else 200)


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
