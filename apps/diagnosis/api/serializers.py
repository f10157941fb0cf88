from rest_framework import serializers

from apps.diagnosis.choices import Problem


class TriageTextSerializer(serializers.Serializer):
    text = serializers.CharField(trim_whitespace=False, help_text="The log's text.")


class TriageUploadSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="A text log file.")


class FindingSerializer(serializers.Serializer):
    problem = serializers.ChoiceField(choices=Problem.choices)
    label = serializers.CharField()
    source = serializers.CharField(help_text="The file name, or 'pasted log'.")
    lines = serializers.ListField(child=serializers.IntegerField(), help_text="Cited line numbers, from 1.")
    excerpt = serializers.ListField(child=serializers.CharField(), help_text="The cited lines, as written.")
    count = serializers.IntegerField(help_text="Lines that matched (more than cited when capped).")
    detail = serializers.CharField()
    rank = serializers.IntegerField(allow_null=True)
    node = serializers.CharField(allow_null=True)
    gpu = serializers.CharField(allow_null=True, help_text="PCI bus id, UUID or CUDA device index, as the log says.")
    nic = serializers.CharField(allow_null=True)
    xid = serializers.IntegerField(allow_null=True)
    xid_name = serializers.CharField(allow_null=True)
    xid_meaning = serializers.CharField(allow_null=True)
    peer = serializers.CharField(allow_null=True)
    device = serializers.CharField(allow_null=True, help_text="A PCI device not known to be a GPU.")
    explanation = serializers.CharField()
    runbook = serializers.CharField()
    next_step = serializers.CharField()


class TriageResultSerializer(serializers.Serializer):
    source = serializers.CharField()
    lines = serializers.IntegerField(help_text="Non-blank lines read.")
    recognised = serializers.BooleanField(help_text="False when no rule fired: nothing is guessed.")
    message = serializers.CharField()
    findings = FindingSerializer(many=True)
