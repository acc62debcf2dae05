"""The submit form: a bundle, or one kernel file plus the fields a manifest would carry."""

from __future__ import annotations

from django import forms
from django.conf import settings

from portal.submissions.constants import DEFAULT_BUDGET, Guidance
from portal.submissions.validation import (
    is_single_kernel,
    single_kernel_fields_beside_bundle,
    single_kernel_missing,
)
from portal.teams.models import Team


class SubmitForm(forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.none(), empty_label=None)
    upload = forms.FileField(label="Bundle (.zip / .tar.gz) or one kernel file (.py)")
    hardware = forms.ChoiceField(choices=(), help_text="overrides the manifest's hardware")
    task = forms.SlugField(required=False, help_text="single kernel only: the task slug")
    model = forms.CharField(required=False, max_length=120, help_text="single kernel only")
    provider = forms.CharField(required=False, max_length=80, help_text="single kernel only")
    harness = forms.CharField(required=False, max_length=120, initial="manual", help_text="single kernel only")
    guidance = forms.ChoiceField(choices=Guidance.choices, initial=Guidance.NONE, help_text="single kernel only")
    budget = forms.IntegerField(min_value=1, max_value=100_000, initial=DEFAULT_BUDGET, help_text="single kernel only")
    guidance_sha256 = forms.CharField(
        required=False, max_length=64, label="Guidance version (SHA-256)",
        help_text="single kernel, guided runs: the digest of the guidance text the agent read, as the task "
                  "page's Versions table lists it")

    def __init__(self, *args, teams=None, **kwargs):  # noqa: ANN001, ANN002, ANN003
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams if teams is not None else Team.objects.none()
        self.fields["hardware"].choices = [(h, h) for h in sorted(settings.D2K_HARDWARE_QUEUES)]
        self.fields["hardware"].initial = settings.D2K_DEFAULT_HARDWARE

    @property
    def is_single_kernel(self) -> bool:
        upload = self.cleaned_data.get("upload")
        return bool(upload and is_single_kernel(upload.name))

    def clean(self) -> dict:
        data = super().clean()
        upload = data.get("upload")
        if upload is not None and upload.size > settings.D2K_UPLOAD_MAX_BYTES:
            raise forms.ValidationError(f"{upload.name}: is {upload.size:,} bytes; the limit is "
                                        f"{settings.D2K_UPLOAD_MAX_BYTES:,} (rule: upload-size)")
        if upload is None:
            return data
        if self.is_single_kernel:
            if missing := single_kernel_missing(data):
                raise forms.ValidationError(f"a single kernel file needs these fields: {', '.join(missing)}")
            return data
        defaults = {name: self.fields[name].initial for name in data if name in self.fields}
        for name in single_kernel_fields_beside_bundle(data, defaults):
            self.add_error(name, f"only for a single kernel file; {upload.name} is a bundle, whose manifest "
                                 f"says it (clear this field, or change the manifest)")
        return data


class ReasonForm(forms.Form):
    reason = forms.CharField(required=False, max_length=4000, widget=forms.Textarea(attrs={"rows": 2}))


class TokenForm(forms.Form):
    name = forms.CharField(max_length=80)
    days = forms.IntegerField(min_value=1, max_value=366, initial=90)
