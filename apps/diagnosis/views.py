"""The triage page: paste or upload a log, read the findings. A POST here only reads; nothing is stored."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.template.defaultfilters import filesizeformat

from apps.diagnosis import services
from apps.diagnosis.choices import Problem
from apps.diagnosis.forms import TriageForm


@login_required
def triage(request):
    result = None
    status = 200
    if request.method == "POST":
        form = TriageForm(request.POST, request.FILES)
        if form.is_valid():
            result = services.triage_text(text=form.cleaned_data["log"], source=form.cleaned_data["source"])
            for finding in result.findings:  # (number, text) pairs for the excerpt
                finding["cited"] = list(zip(finding["lines"], finding["excerpt"], strict=True))
        else:
            status = 400
    else:
        form = TriageForm()
    context = {
        "form": form,
        "result": result,
        "limit": filesizeformat(services.max_bytes()),
        "problems": Problem.choices,
    }
    return render(request, "diagnosis/triage.html", context, status=status)
